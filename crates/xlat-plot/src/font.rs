//! The font text is drawn with: DejaVu Sans, bundled (`fonts/`, Bitstream Vera license
//! in `fonts/LICENSE-DejaVu`), so charts render on a machine without fonts; `$XLAT_FONT`
//! names another TrueType file.

use crate::PlotError;
use plotters::style::FontStyle;

/// DejaVu Sans 2.37.
pub(crate) static BUNDLED: &[u8] = include_bytes!("../fonts/DejaVuSans.ttf");

/// The font's bytes: `$XLAT_FONT`'s file if set, else the bundled one.
pub(crate) fn bytes(env: Option<std::ffi::OsString>) -> Result<&'static [u8], String> {
    match env {
        None => Ok(BUNDLED),
        Some(p) => match std::fs::read(&p) {
            // plotters keeps the font for the process's life.
            Ok(b) => Ok(Box::leak(b.into_boxed_slice())),
            Err(e) => Err(format!("XLAT_FONT={}: {e}", p.to_string_lossy())),
        },
    }
}

/// Registers the font as plotters' `sans-serif` (once per process).
pub(crate) fn register() -> Result<(), PlotError> {
    static DONE: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    DONE.get_or_init(|| {
        let b = bytes(std::env::var_os("XLAT_FONT"))?;
        plotters::style::register_font("sans-serif", FontStyle::Normal, b)
            .map_err(|_| "XLAT_FONT: not a TrueType font plotters can read".to_string())
    })
    .clone()
    .map_err(PlotError::Font)
}
