//! What a build of the library holds: its version and commit, and for each kernel module the
//! architectures it carries machine code for and the PTX it falls back to.

use std::fmt::Write as _;

use sgemm_bi_host::{ImageKind, LoadedImage};

use crate::kernels;

/// One kernel module of a build.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleInfo {
    /// `"sm80"` (every GPU from 8.0 on) or `"sm90a"` (compute capability 9.0 only).
    pub name: &'static str,
    /// The architecture its PTX is written for; the driver compiles it on GPUs that no
    /// machine code below runs on.
    pub ptx_target: &'static str,
    /// Architectures with machine code (ptxas names, e.g. `"sm_86"`): no compile on first
    /// use. A cubin for X.y also runs on X.z with z > y; `a` targets only on their own.
    pub machine_code: Vec<&'static str>,
    /// Bytes embedded for the module (compressed), and its PTX uncompressed.
    pub embedded_bytes: usize,
    pub ptx_bytes: usize,
}

/// What this build of the library holds ([`build_info`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuildInfo {
    /// The crate version, e.g. `"0.2.0"`.
    pub version: &'static str,
    /// The git commit the build started from (12 hex digits), or empty outside a clone
    /// (`SGEMM_BI_COMMIT` sets it for packagers).
    pub commit: &'static str,
    /// Where the kernels come from: see [`kernels::SOURCE`].
    pub kernels: &'static str,
    /// The ptxas that made the machine code (its version line), or empty if none.
    pub ptxas: &'static str,
    /// The kernel modules.
    pub modules: Vec<ModuleInfo>,
}

/// What this build of the library holds.
pub fn build_info() -> BuildInfo {
    let modules = kernels::KERNELS
        .modules()
        .into_iter()
        .map(|m| ModuleInfo {
            name: m.name,
            ptx_target: m.ptx_target,
            machine_code: m.cubins.iter().map(|c| c.arch).collect(),
            embedded_bytes: m.ptx.zstd.len()
                + m.cubins.iter().map(|c| c.image.zstd.len()).sum::<usize>(),
            ptx_bytes: m.ptx.len,
        })
        .collect();
    BuildInfo {
        version: env!("CARGO_PKG_VERSION"),
        commit: env!("SGEMM_BI_COMMIT"),
        kernels: kernels::SOURCE,
        ptxas: kernels::PTXAS_VERSION,
        modules,
    }
}

impl BuildInfo {
    /// The same as JSON (one object; the C ABI's `sgemm_bi_build_info()` and Python's
    /// `sgemm_bi.build_info()` give this text). With `loaded`, an engine's
    /// [`Engine::loaded_images`](crate::Engine), it also says which image of each module that
    /// engine's device runs.
    pub fn to_json(&self, loaded: Option<&[LoadedImage]>) -> String {
        let mut s = String::from("{");
        write!(
            s,
            "\"version\":{},\"commit\":{},\"kernels\":{},\"ptxas\":{},\"modules\":[",
            json_str(self.version),
            json_str(self.commit),
            json_str(self.kernels),
            json_str(self.ptxas)
        )
        .unwrap();
        for (i, m) in self.modules.iter().enumerate() {
            let archs: Vec<String> = m.machine_code.iter().map(|a| json_str(a)).collect();
            write!(
                s,
                "{}{{\"name\":{},\"ptx_target\":{},\"machine_code\":[{}],\"embedded_bytes\":{},\"ptx_bytes\":{}}}",
                if i > 0 { "," } else { "" },
                json_str(m.name),
                json_str(m.ptx_target),
                archs.join(","),
                m.embedded_bytes,
                m.ptx_bytes
            )
            .unwrap();
        }
        s.push(']');
        if let Some(loaded) = loaded {
            s.push_str(",\"loaded\":[");
            for (i, l) in loaded.iter().enumerate() {
                let (image, arch, refused) = match l.image {
                    ImageKind::MachineCode { arch } => ("machine code", arch, false),
                    ImageKind::Ptx { refused } => ("ptx", "", refused),
                };
                write!(
                    s,
                    "{}{{\"module\":{},\"image\":{},\"arch\":{},\"machine_code_refused\":{},\"entry_points\":{}}}",
                    if i > 0 { "," } else { "" },
                    json_str(l.module),
                    json_str(image),
                    json_str(arch),
                    refused,
                    l.entry_points
                )
                .unwrap();
            }
            s.push(']');
        }
        s.push('}');
        s
    }
}

impl std::fmt::Display for BuildInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let commit = if self.commit.is_empty() {
            "unknown commit"
        } else {
            self.commit
        };
        writeln!(
            f,
            "sgemm-bi {} ({commit}), kernels {}",
            self.version, self.kernels
        )?;
        if !self.ptxas.is_empty() {
            writeln!(f, "machine code by ptxas: {}", self.ptxas)?;
        }
        for m in &self.modules {
            let code = if m.machine_code.is_empty() {
                "none".to_string()
            } else {
                m.machine_code.join(", ")
            };
            writeln!(
                f,
                "{}: machine code for {code}; PTX for {} ({} bytes embedded)",
                m.name, m.ptx_target, m.embedded_bytes
            )?;
        }
        Ok(())
    }
}

/// A JSON string literal of `s` (the values here are ASCII identifiers and version lines;
/// quotes, backslashes and control characters are escaped all the same).
fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => write!(out, "\\u{:04x}", c as u32).unwrap(),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_strings_escape_what_json_needs() {
        assert_eq!(json_str("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000a\"");
    }

    #[test]
    fn every_architecture_the_build_makes_is_listed() {
        let info = build_info();
        assert_eq!(info.version, env!("CARGO_PKG_VERSION"));
        let sm80 = &info.modules[0];
        assert_eq!((sm80.name, sm80.ptx_target), ("sm80", "sm_80"));
        let sm90a = &info.modules[1];
        assert_eq!((sm90a.name, sm90a.ptx_target), ("sm90a", "sm_90a"));
        let json = info.to_json(None);
        assert!(
            json.starts_with("{\"version\":\"") && json.ends_with("]}"),
            "{json}"
        );
        for m in &info.modules {
            assert!(json.contains(&format!("\"name\":\"{}\"", m.name)), "{json}");
        }
    }
}
