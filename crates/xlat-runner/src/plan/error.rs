//! `PlanError`: why a plan, a shard file, a `--set`/`--sweep` or a machine of a sweep is
//! refused; [`Context`] adds what was being done, as the binary prints it (`what: cause`).

/// Why a plan or one of its files is refused.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// What is wrong, in words (a plan's or a shard file's content, `--set`, `--sweep`).
    #[error("{0}")]
    Invalid(String),
    /// What was being done, then why it failed.
    #[error("{what}")]
    Context {
        what: String,
        #[source]
        source: Box<PlanError>,
    },
    /// A file or directory operation failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// JSON of the wrong shape, or that cannot be written.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// A file read as an untrusted input.
    #[error(transparent)]
    Input(#[from] xlat_fs::InputError),
    /// A machine that does not load.
    #[error(transparent)]
    Config(#[from] xlat_sim::ConfigError),
}

impl PlanError {
    /// This error with `what` as its context.
    pub fn context(self, what: impl Into<String>) -> PlanError {
        PlanError::Context {
            what: what.into(),
            source: Box::new(self),
        }
    }

    /// The configuration error at the root of this one, if it is one.
    pub fn config(&self) -> Option<&xlat_sim::ConfigError> {
        match self {
            PlanError::Config(c) => Some(c),
            PlanError::Context { source, .. } => source.config(),
            _ => None,
        }
    }
}

/// What was being done when a step failed, added to its error.
pub(crate) trait Context<T> {
    fn context(self, what: &str) -> Result<T, PlanError>;
    fn with_context(self, what: impl FnOnce() -> String) -> Result<T, PlanError>;
}

impl<T, E: Into<PlanError>> Context<T> for Result<T, E> {
    fn context(self, what: &str) -> Result<T, PlanError> {
        self.map_err(|e| e.into().context(what))
    }

    fn with_context(self, what: impl FnOnce() -> String) -> Result<T, PlanError> {
        self.map_err(|e| e.into().context(what()))
    }
}

/// Returns [`PlanError::Invalid`] with the message unless `cond` holds.
macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err($crate::plan::PlanError::Invalid(format!($($msg)+)));
        }
    };
}

/// Returns [`PlanError::Invalid`] with the message.
macro_rules! bail {
    ($($msg:tt)+) => {
        return Err($crate::plan::PlanError::Invalid(format!($($msg)+)))
    };
}

pub(crate) use {bail, ensure};
