//! `pir-breach`: private credential checks. Work in progress.
