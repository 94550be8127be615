//! `xlat validate`'s programs: a dependent pointer chase and random updates (C sources
//! built with `cc`), a compression run (`xz`) and a fork-heavy shell loop (`bash`), each in
//! two configurations that change translation only (4 KiB pages vs transparent huge pages:
//! the program's own `madvise`, or glibc's `glibc.malloc.hugetlb` tunable for a program that
//! mallocs its memory).

use anyhow::{bail, Context, Result};
use std::path::Path;
use std::process::{Command, Stdio};

/// A dependent chase over MiB megabytes, one line per 4 KiB page at a hashed offset, pages
/// in a random cycle; `argv`: MiB loads huge(0|1).
const CHASE_C: &str = r#"
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#define LINE(p) ((((p) * 2654435761u) >> 9) % 64 * 64)
int main(int argc, char **argv) {
    if (argc != 4) return 2;
    size_t len = strtoul(argv[1], 0, 0) << 20, loads = strtoul(argv[2], 0, 0), pages = len >> 12;
    size_t huge = 2u << 20;
    char *m = mmap(0, len + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED || pages < 2) return 1;
    char *b = (char *)(((uintptr_t)m + huge - 1) & ~(uintptr_t)(huge - 1));
    madvise(b, len, atoi(argv[3]) ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    size_t *perm = malloc(pages * sizeof *perm);
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < pages; i++) perm[i] = i;
    for (size_t i = pages - 1; i > 0; i--) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        size_t j = x % (i + 1), t = perm[i]; perm[i] = perm[j]; perm[j] = t;
    }
    for (size_t k = 0; k < pages; k++) {
        size_t a = perm[k], n = perm[(k + 1) % pages];
        *(void **)(b + (a << 12) + LINE(a)) = b + (n << 12) + LINE(n);
    }
    void **p = (void **)(b + (perm[0] << 12) + LINE(perm[0]));
    free(perm);
    for (size_t i = 0; i < loads; i++) p = *p;
    return p == 0;
}
"#;

/// Random 8-byte updates (independent: they overlap) over MiB megabytes; `argv`: MiB
/// updates huge(0|1).
const GUPS_C: &str = r#"
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
int main(int argc, char **argv) {
    if (argc != 4) return 2;
    size_t len = strtoul(argv[1], 0, 0) << 20, n = strtoul(argv[2], 0, 0), words = len / 8;
    size_t huge = 2u << 20;
    char *m = mmap(0, len + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED || words < 2) return 1;
    uint64_t *t = (uint64_t *)(((uintptr_t)m + huge - 1) & ~(uintptr_t)(huge - 1));
    madvise(t, len, atoi(argv[3]) ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    for (size_t i = 0; i < words; i += 512) t[i] = i;
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        t[x % words] ^= x;
    }
    return (int)(t[1] & 0);
}
"#;

/// One program in its two configurations.
pub struct Case {
    pub name: String,
    /// argv of the 4 KiB configuration, then of the huge-page one.
    pub runs: [Vec<String>; 2],
    /// `time.mlp` for this program, when its misses cannot overlap as the machine's
    /// (independent loads') do: the program's structure, stated, not fitted.
    pub mlp: Option<f64>,
}

pub(super) fn build(dir: &Path, name: &str, source: &str) -> Result<String> {
    let c = dir.join(format!("{name}.c"));
    let exe = dir.join(name);
    std::fs::write(&c, source)?;
    let st = Command::new("cc")
        .args(["-O2", "-o"])
        .arg(&exe)
        .arg(&c)
        .stdin(Stdio::null())
        .status()
        .context("running cc (xlat validate builds its test programs with the C compiler)")?;
    if !st.success() {
        bail!("cc could not build {name}.c ({st})");
    }
    Ok(exe.to_string_lossy().into_owned())
}

/// `bytes` of base64-like text (64 symbols from a xorshift generator, a newline every 76):
/// what the compressor reads, the same on every run.
fn text(path: &Path, bytes: usize) -> Result<()> {
    const SYMBOLS: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut x = 88172645463325252u64;
    let mut out = Vec::with_capacity(bytes);
    while out.len() < bytes {
        if out.len() % 77 == 76 {
            out.push(b'\n');
            continue;
        }
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.push(SYMBOLS[(x >> 58) as usize]);
    }
    std::fs::write(path, out).with_context(|| format!("writing {}", path.display()))
}

/// argv under glibc's malloc huge-page tunable (0: none; 1: `madvise(MADV_HUGEPAGE)` on
/// what malloc maps), through `env` (the capture follows its `exec`).
fn tunable(huge: &str, argv: &[&str]) -> Vec<String> {
    [
        "env",
        &format!("GLIBC_TUNABLES=glibc.malloc.hugetlb={huge}"),
    ]
    .into_iter()
    .chain(argv.iter().copied())
    .map(str::to_string)
    .collect()
}

/// The programs, built or written in `dir`.
pub fn cases(dir: &Path, quick: bool) -> Result<Vec<Case>> {
    let chase = build(dir, "chase", CHASE_C)?;
    let gups = build(dir, "gups", GUPS_C)?;
    let both = |exe: &str, args: &[&str]| -> [Vec<String>; 2] {
        let argv = |huge: &str| {
            std::iter::once(exe.to_string())
                .chain(args.iter().map(|s| s.to_string()))
                .chain([huge.to_string()])
                .collect()
        };
        [argv("0"), argv("1")]
    };
    // The chases' footprints lie on either side of the last cache, away from its edge: at
    // 64 MiB their 16 K lines (2 MiB with a 128 B fill block) fit in a shared VM's share of
    // it; at 1 GiB (256 K lines, 32 MiB) they cannot. Between (256 MiB: 8 MiB of lines)
    // the time followed how much cache other tenants left, run to run, not translation.
    let (mib_small, mib_big, mib_far, loads, updates) = if quick {
        ("8", "16", "32", "200000", "200000")
    } else {
        ("64", "256", "1024", "10000000", "10000000")
    };
    // xz -6 (a 94 MiB match finder) over pseudo-random text; bash holding a long string
    // (its heap) while it forks and execs /bin/true: fork copies the heap's page tables.
    let (text_bytes, seq, iterations) = if quick {
        (200_000, 300_000, 20)
    } else {
        (3_000_000, 3_000_000, 300)
    };
    let input = dir.join("input.txt");
    text(&input, text_bytes)?;
    let input = input.to_string_lossy().into_owned();
    let xz = ["xz", "-6", "-T1", "-k", "-f", "-q", input.as_str()];
    let script = format!("a=$(seq 1 {seq}); for i in $(seq {iterations}); do /bin/true; done");
    let bash = ["bash", "-c", script.as_str()];
    for (tool, what) in [("xz", "xz-utils"), ("bash", "bash")] {
        if xlat_capture::which(std::ffi::OsStr::new(tool)).is_err() {
            bail!("{tool} is not installed (Debian: {what}): xlat validate runs it");
        }
    }
    Ok(vec![
        // Each load's address is the load before it: nothing overlaps.
        Case {
            name: format!("pointer chase {mib_small} MiB"),
            runs: both(&chase, &[mib_small, loads]),
            mlp: Some(1.0),
        },
        Case {
            name: format!("pointer chase {mib_far} MiB"),
            runs: both(&chase, &[mib_far, loads]),
            mlp: Some(1.0),
        },
        Case {
            name: format!("random updates {mib_big} MiB"),
            runs: both(&gups, &[mib_big, updates]),
            mlp: None,
        },
        Case {
            name: format!("xz -6, {} KB of text", text_bytes / 1000),
            runs: [tunable("0", &xz), tunable("1", &xz)],
            mlp: None,
        },
        Case {
            name: format!("shell loop: {iterations} × fork+exec, {seq}-line heap"),
            runs: [tunable("0", &bash), tunable("1", &bash)],
            mlp: None,
        },
    ])
}
