//! Link maps (`-Wl,-Map=FILE`): the input sections of the `.text` output section, where
//! they are and how large: what a linker moves when it applies an order. A section holds
//! one function when code is built with `-ffunction-sections`; an archive built without
//! (a static C library) holds several per section, and code without a sized symbol
//! (crt's start-up code) sits in sections of its own.
//!
//! lld's map has columns (`VMA LMA Size Align Out In Symbol`, the level told by the
//! column a name starts in); GNU ld's and gold's list `.text` with its input sections one
//! space in (the address, size and file on the same line, or on the next one after a long
//! name) and no alignment: it is taken from the address (up to 16 bytes).

/// An input section of `.text`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Section {
    /// Link-time address.
    pub addr: u64,
    pub size: u64,
    pub align: u64,
    /// As the map names it (`file:(.text.f)`, or the section and its file).
    pub name: String,
}

/// Why a link map could not be read.
#[derive(Debug, thiserror::Error)]
pub enum MapError {
    #[error("{what}: not a link map of lld, GNU ld or gold (`-Wl,-Map=FILE` writes one): {why}")]
    Format { what: String, why: String },
}

/// The input sections of `.text` in the map `text` (named `what`), by address.
pub fn parse(text: &str, what: &str) -> Result<Vec<Section>, MapError> {
    let err = |why: &str| MapError::Format {
        what: what.to_string(),
        why: why.to_string(),
    };
    let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let mut out = if first.split_whitespace().take(2).eq(["VMA", "LMA"]) {
        lld(text, first).ok_or_else(|| err("its header has no `Out` and `In` columns"))?
    } else {
        gnu(text)
    };
    if out.is_empty() {
        return Err(err("no input section of a `.text` output section"));
    }
    out.sort_by_key(|s| s.addr);
    Ok(out)
}

fn hex(s: &str) -> Option<u64> {
    u64::from_str_radix(s.trim_start_matches("0x"), 16).ok()
}

/// Where each whitespace-separated word of `line` starts.
fn word_starts(line: &str) -> Vec<usize> {
    let mut out = Vec::new();
    let mut prev = ' ';
    for (i, c) in line.char_indices() {
        if !c.is_whitespace() && prev.is_whitespace() {
            out.push(i);
        }
        prev = c;
    }
    out
}

/// lld: the level of a line is the column its name starts at (`Out`, `In`, `Symbol`).
fn lld(text: &str, header: &str) -> Option<Vec<Section>> {
    let (in_col, sym_col) = (header.find(" In ")? + 1, header.find(" Symbol")? + 1);
    let mut out = Vec::new();
    let mut in_text = false;
    for line in text.lines().skip_while(|l| *l != header).skip(1) {
        let t: Vec<&str> = line.split_whitespace().collect();
        let (Some(addr), Some(size), Some(align)) = (
            t.first().and_then(|a| hex(a)),
            t.get(2).and_then(|s| hex(s)),
            t.get(3).and_then(|a| a.parse::<u64>().ok()),
        ) else {
            continue;
        };
        let Some(&col) = word_starts(line).get(4) else {
            continue;
        };
        if col < in_col {
            in_text = t[4] == ".text";
        } else if in_text && col < sym_col && size > 0 {
            out.push(Section {
                addr,
                size,
                align: align.max(1),
                name: t[4..].join(" "),
            });
        }
    }
    Some(out)
}

/// GNU ld and gold.
fn gnu(text: &str) -> Vec<Section> {
    let mut out = Vec::new();
    let mut in_text = false;
    let mut pending: Option<&str> = None;
    for line in text.lines() {
        if !line.starts_with(' ') && !line.is_empty() {
            let name = line.split_whitespace().next().unwrap_or("");
            in_text = name == ".text";
            pending = None;
            continue;
        }
        if !in_text {
            continue;
        }
        let t: Vec<&str> = line.split_whitespace().collect();
        let (name, rest) = match pending.take() {
            Some(n) => (n, &t[..]),
            None if line.starts_with(" .") && t.len() == 1 => {
                pending = Some(t[0]);
                continue;
            }
            None if line.starts_with(" .") => (t[0], &t[1..]),
            None => continue,
        };
        // Address, size and the file.
        if let [a, s, file @ ..] = rest {
            if let (Some(addr), Some(size)) = (hex(a), hex(s)) {
                if size > 0 && a.starts_with("0x") && s.starts_with("0x") {
                    out.push(Section {
                        addr,
                        size,
                        align: 1 << addr.trailing_zeros().min(4),
                        name: format!("{}:({name})", file.join(" ")),
                    });
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `m`'s sections as (address, size, alignment, name).
    fn parsed(m: &str) -> Vec<(u64, u64, u64, String)> {
        parse(m, "m")
            .unwrap()
            .into_iter()
            .map(|x| (x.addr, x.size, x.align, x.name))
            .collect()
    }

    fn row(addr: u64, size: u64, align: u64, name: &str) -> (u64, u64, u64, String) {
        (addr, size, align, name.to_string())
    }

    #[test]
    fn lld_maps_give_the_input_sections_of_text() {
        let m = "             VMA              LMA     Size Align Out     In      Symbol
          2002b0           2002b0       10     1 .interp
          2002b0           2002b0       10     1         <internal>:(.interp)
          22abc0           22abc0   110dd1    64 .text
          22abc0           22abc0       31    16         crt1.o:(.text)
          22abc0           22abc0       22     1                 _start
          22abf1           22abf1        0     1         crti.o:(.text)
          22ac00           22ac00       e5    16         crtbeginT.o:(.text)
          22ac00           22ac00        0     1                 deregister_tm_clones
          22ace5           22ace5        9     1         /tmp/x.o:(.text.by_byte)
          22ace5           22ace5        9     1                 by_byte
          23c000           23c000      100    64 .fini
          23c000           23c000      100    64         crti.o:(.fini)
";
        assert_eq!(
            parsed(m),
            [
                row(0x22abc0, 0x31, 16, "crt1.o:(.text)"),
                row(0x22ac00, 0xe5, 16, "crtbeginT.o:(.text)"),
                row(0x22ace5, 9, 1, "/tmp/x.o:(.text.by_byte)"),
            ]
        );
    }

    #[test]
    fn gnu_and_gold_maps_give_the_input_sections_of_text() {
        let m = "Memory map

.init           0x0000000000401000       0x1b
 .init          0x0000000000401000       0x16 crti.o

.text           0x0000000000401100   0x110def
 *(.text.unlikely .text.*_unlikely .text.unlikely.*)
 .text.unlikely
                0x0000000000401100        0xf libc.a(assert.o)
 .text          0x0000000000401110       0x26 crt1.o
                0x0000000000401110                _start
 *fill*         0x0000000000401136        0xa 
 .text.hot10    0x00000000004022e7      0x396 /tmp/cc4Gg0ml.o
                0x00000000004022e7                hot10

.fini           0x0000000000511000        0xd
";
        assert_eq!(
            parsed(m),
            [
                row(0x401100, 0xf, 16, "libc.a(assert.o):(.text.unlikely)"),
                row(0x401110, 0x26, 16, "crt1.o:(.text)"),
                row(0x4022e7, 0x396, 1, "/tmp/cc4Gg0ml.o:(.text.hot10)"),
            ]
        );
        assert!(parse("hello\n", "m").is_err());
    }
}
