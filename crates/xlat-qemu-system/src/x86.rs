//! The x86 instruction the plugin looks for at translation.

/// Whether `b` (an instruction's bytes) is `mov %reg,%cr3`: `0f 22 /r` with ModRM.reg = 3,
/// after legacy and REX prefixes (REX.R set would name %cr11, which does not exist).
pub fn is_mov_to_cr3(b: &[u8]) -> bool {
    let mut i = 0;
    let mut rex_r = false;
    while let Some(&p) = b.get(i) {
        match p {
            0x66 | 0xf2 | 0xf3 => {}
            0x40..=0x4f => rex_r = p & 4 != 0,
            _ => break,
        }
        i += 1;
    }
    matches!(b.get(i..i + 3), Some(&[0x0f, 0x22, modrm]) if (modrm >> 3) & 7 == 3) && !rex_r
}

#[cfg(test)]
mod tests {
    use super::is_mov_to_cr3;

    #[test]
    fn finds_the_moves_to_cr3_and_nothing_else() {
        assert!(is_mov_to_cr3(&[0x0f, 0x22, 0xd8])); // mov %rax,%cr3
        assert!(is_mov_to_cr3(&[0x0f, 0x22, 0xdf])); // mov %rdi,%cr3
        assert!(is_mov_to_cr3(&[0x41, 0x0f, 0x22, 0xd8])); // mov %r8,%cr3 (REX.B)
        assert!(!is_mov_to_cr3(&[0x0f, 0x22, 0xe0])); // mov %rax,%cr4
        assert!(!is_mov_to_cr3(&[0x0f, 0x22, 0xc0])); // mov %rax,%cr0
        assert!(!is_mov_to_cr3(&[0x0f, 0x20, 0xd8])); // mov %cr3,%rax (a read)
        assert!(!is_mov_to_cr3(&[0x44, 0x0f, 0x22, 0xd8])); // REX.R: %cr11
        assert!(!is_mov_to_cr3(&[0x0f, 0x22])); // cut short
        assert!(!is_mov_to_cr3(&[]));
    }
}
