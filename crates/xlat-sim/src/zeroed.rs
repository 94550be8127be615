//! [`Zeroed`]: a large array of all-zero values that costs the host only the pages it
//! touches. On Linux it is an anonymous mapping (the kernel fills pages with zeros on
//! first touch); a heap allocation, even from `calloc`, may be cleared eagerly by the
//! allocator. Used for per-process tables that are mostly empty (issue 14: 10,000 live
//! forks cost 2.5 GB when each cleared its 256 KiB of page-table hints).

use std::ops::Deref;
use std::ptr::NonNull;

/// An owned, zero-initialized `T` (which must be valid as all zero bytes).
pub struct Zeroed<T> {
    ptr: NonNull<T>,
}

// SAFETY: `Zeroed<T>` owns its `T` like a `Box<T>` does.
unsafe impl<T: Send> Send for Zeroed<T> {}

impl<T> Zeroed<T> {
    /// A zero-filled `T`.
    ///
    /// # Safety
    /// All-zero bytes must be a valid `T`.
    pub unsafe fn new() -> Self {
        let size = std::mem::size_of::<T>();
        assert!(size > 0 && std::mem::align_of::<T>() <= 4096);
        #[cfg(target_os = "linux")]
        {
            // SAFETY: a fresh private anonymous mapping; the kernel zero-fills it and
            // aligns it to a page.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    size,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            if p == libc::MAP_FAILED {
                std::alloc::handle_alloc_error(std::alloc::Layout::new::<T>());
            }
            Zeroed {
                ptr: NonNull::new(p as *mut T).expect("mmap returned a non-null address"),
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            let layout = std::alloc::Layout::new::<T>();
            // SAFETY: a non-zero size; the caller promises zeros are a valid `T`.
            let p = unsafe { std::alloc::alloc_zeroed(layout) };
            match NonNull::new(p as *mut T) {
                Some(ptr) => Zeroed { ptr },
                None => std::alloc::handle_alloc_error(layout),
            }
        }
    }
}

impl<T> Deref for Zeroed<T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: `ptr` is valid for the life of `self` and initialized (zeros).
        unsafe { self.ptr.as_ref() }
    }
}

impl<T> std::ops::DerefMut for Zeroed<T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as `deref`, and `&mut self` makes the access unique.
        unsafe { self.ptr.as_mut() }
    }
}

impl<T> Drop for Zeroed<T> {
    fn drop(&mut self) {
        // SAFETY: the pointer came from `new` with this size/layout, and `T` needs no
        // drop of its own contents beyond memory (callers store plain data).
        unsafe {
            std::ptr::drop_in_place(self.ptr.as_ptr());
            #[cfg(target_os = "linux")]
            libc::munmap(
                self.ptr.as_ptr() as *mut libc::c_void,
                std::mem::size_of::<T>(),
            );
            #[cfg(not(target_os = "linux"))]
            std::alloc::dealloc(self.ptr.as_ptr() as *mut u8, std::alloc::Layout::new::<T>());
        }
    }
}

impl<T> std::fmt::Debug for Zeroed<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Zeroed<{}>", std::any::type_name::<T>())
    }
}
