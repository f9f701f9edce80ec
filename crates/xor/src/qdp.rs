//! Query-dependent preprocessing (QDP) for RAID-PIR. Work in progress.
