//! The guest kernel's large pages, read from its page tables when recording starts.

use qemu_plugin_sys::*;
use std::os::raw::c_int;

extern "C" {
    fn g_byte_array_new() -> *mut GByteArray;
    fn g_array_free(array: *mut GArray, free_segment: c_int) -> *mut std::os::raw::c_char;
}

/// The kernel half's 2 MiB and 1 GiB leaves under the page-table root `cr3`, as runs
/// `[addr, len, shift]` of one leaf size: 4-level x86-64 tables read through the kernel's
/// direct map (at its no-KASLR base, which `nokaslr` keeps), present entries only. 4 KiB
/// leaves are the default and are not listed.
pub unsafe fn kernel_pages(cr3: u64) -> Vec<[u64; 3]> {
    const DIRECT_MAP: u64 = 0xffff_8880_0000_0000;
    const ADDR: u64 = 0x000f_ffff_ffff_f000;
    const PRESENT: u64 = 1;
    const LARGE: u64 = 1 << 7;
    let buf = g_byte_array_new();
    let table = |phys: u64| -> Option<Vec<u64>> {
        (*buf).len = 0;
        if !qemu_plugin_read_memory_vaddr(DIRECT_MAP + phys, buf, 4096) || (*buf).len < 4096 {
            return None;
        }
        let bytes = std::slice::from_raw_parts((*buf).data, 4096);
        Some(
            bytes
                .chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
                .collect(),
        )
    };
    let mut runs: Vec<[u64; 3]> = Vec::new();
    let mut add = |va: u64, shift: u64| match runs.last_mut() {
        Some(r) if r[2] == shift && r[0] + r[1] == va => r[1] += 1 << shift,
        _ => runs.push([va, 1 << shift, shift]),
    };
    if let Some(pml4) = table(cr3 & ADDR) {
        for (i, &e4) in pml4.iter().enumerate().skip(256) {
            if e4 & PRESENT == 0 {
                continue;
            }
            let va4 = 0xffff_0000_0000_0000 | (i as u64) << 39;
            let Some(pdpt) = table(e4 & ADDR) else {
                continue;
            };
            for (j, &e3) in pdpt.iter().enumerate() {
                let va3 = va4 | (j as u64) << 30;
                if e3 & PRESENT == 0 {
                    continue;
                }
                if e3 & LARGE != 0 {
                    add(va3, 30);
                    continue;
                }
                let Some(pd) = table(e3 & ADDR) else { continue };
                for (k, &e2) in pd.iter().enumerate() {
                    if e2 & PRESENT != 0 && e2 & LARGE != 0 {
                        add(va3 | (k as u64) << 21, 21);
                    }
                }
            }
        }
    }
    g_array_free(buf as *mut GArray, 1);
    runs
}
