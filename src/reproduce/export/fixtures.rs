//! What the export's tests build on: a run manifest, a cell, a base and
//! its bootstrap.

use crate::image::{BaseImage, BaseOrigin};
use crate::plan::Cell;
use crate::store::lock::Bootstrap;
use crate::store::record::RunManifest;

pub(super) fn manifest() -> RunManifest {
    serde_json::from_value::<crate::store::schema::PlanFile>(serde_json::json!({
        "store_version": 1, "run_id": "r1", "rocmatrix_version": "0.1.0",
        "name": "m", "matrix_file": "m.yaml", "matrix_hash": "h", "keys": ["gfx"],
        "expect": [], "report": {"rows": [], "columns": []}, "cells": []
    }))
    .unwrap()
    .into()
}

pub(super) fn cell() -> Cell {
    serde_json::from_value::<crate::store::schema::plan::Cell>(serde_json::json!({
        "id": "gfx=gfx1030", "values": {"gfx": "gfx1030"},
        "environment": {"family": "debian", "base": "debian:bookworm", "suite": null,
            "mirror": null, "packages": ["mypkg"], "llvm": "release", "setup": null,
            "env": {}, "network": null},
        "environment_hash": "e", "steps": [],
        "gpu": {"need": "none", "count": 1, "target": null, "policy": "exact"},
        "hash": "0123456789abcdef"
    }))
    .unwrap()
    .into()
}

pub(super) fn base(origin: BaseOrigin) -> BaseImage {
    BaseImage {
        reference: "debian:bookworm".into(),
        id: "sha256:1d".into(),
        origin,
    }
}

pub(super) fn bootstrap(date: Option<&str>) -> Bootstrap {
    Bootstrap {
        suite: "sid".into(),
        mirror: "http://deb.debian.org/debian".into(),
        release_date: date.map(str::to_string),
    }
}
