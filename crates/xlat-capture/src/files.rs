//! A capture's file table: the paths of `MAPFILE` records, numbered in order of first
//! appearance (`Event::MapFile`'s `file`).

use std::collections::HashMap;

/// Distinct files a capture numbers; later ones get [`Files::FULL`].
pub const MAX_FILES: usize = 1 << 16;

#[derive(Debug, Default)]
pub struct Files {
    names: Vec<String>,
    index: HashMap<Vec<u8>, u32>,
}

impl Files {
    /// The number of files past [`MAX_FILES`] (no name: the table is full).
    pub const FULL: u32 = u32::MAX;

    /// The number of `path` (the same path, the same number).
    pub fn id(&mut self, path: &[u8]) -> u32 {
        if let Some(&i) = self.index.get(path) {
            return i;
        }
        if self.names.len() >= MAX_FILES {
            return Self::FULL;
        }
        let i = self.names.len() as u32;
        self.names.push(String::from_utf8_lossy(path).into_owned());
        self.index.insert(path.to_vec(), i);
        i
    }

    /// The paths, by number.
    pub fn names(&self) -> &[String] {
        &self.names
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_paths_once_in_order() {
        let mut f = Files::default();
        assert_eq!(f.id(b"/bin/a"), 0);
        assert_eq!(f.id(b"/lib/b.so"), 1);
        assert_eq!(f.id(b"/bin/a"), 0);
        assert_eq!(f.names(), ["/bin/a", "/lib/b.so"]);
    }
}
