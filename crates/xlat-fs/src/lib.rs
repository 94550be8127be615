//! Files where someone else may be hostile (see `SECURITY.md`): one helper per class of
//! danger, used by every crate that touches such a place.
//!
//! - [`private_dir`]: every temporary file or socket lives in a directory made like
//!   `mkdtemp(3)` (a random name, mode 0700, created with `mkdir`, which never follows a
//!   link), under a `$TMPDIR` that others cannot rename it out of. Nothing is ever
//!   executed from, or created under, a predictable name in a shared directory.
//! - [`read_input`]/[`open_input`]: a path named by an input (a trace's file table, a plan,
//!   a flag) is opened without blocking, must be a regular file and is read up to a size
//!   cap; errors name the path and the field that named it.
//! - [`OutFile`]: an output file appears complete or not at all, and an output path that
//!   is a link another user planted in a sticky shared directory is refused
//!   ([`check_output_path`], Linux's `protected_symlinks` rule).

mod input;
mod links;
mod outfile;
mod private;

pub use input::{open_input, read_input, read_input_string, InputError};
pub use links::check_output_path;
pub use outfile::OutFile;
pub use private::{private_dir, PrivateDir};
