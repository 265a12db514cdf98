//! GPUs: the KFD inventory, gfx target ids, ISA compatibility, leases for
//! cells, and the host checks behind `rocmatrix gpus`.
//!
//! Everything here is plain data read from a sysfs root and a `/dev` root, so
//! it is tested on fixtures without a GPU.

pub mod cdi;
pub mod checks;
pub mod compat;
pub mod gate;
pub mod inventory;
pub mod lease;
pub mod nvidia;
pub mod target;

use std::path::PathBuf;

pub use compat::{runs_on, How};
pub use inventory::{Gpu, Inventory};
pub use lease::{DeviceMapping, Lease, LeaseRequest, Leaser, Outcome};
pub use target::{TargetError, TargetId};

/// Errors reading the topology or device nodes.
#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}:{line}: {message}", path.display())]
    Property {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error(transparent)]
    Target(#[from] TargetError),
}
