//! rocmatrix's integration tests: one binary, one module per area.

mod architecture_tests;
mod bundle_tests;
mod cdi_tests;
mod ci_plan_tests;
mod cli_tests;
mod expand_props;
mod family_tests;
mod fuzz_props;
mod gpu_evidence_tests;
mod gpu_run_tests;
mod gpu_tests;
mod harness;
mod harness_tests;
mod hostile_tests;
mod package_cache_tests;
mod podman_tests;
mod registry_tests;
mod report_html;
mod report_tests;
mod report_tools;
mod repro_tests;
mod run_tests;
mod signature_tests;
mod source_tests;
mod spec_tests;
mod suite_tests;
