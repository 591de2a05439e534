//! What `cargo xtask ci` runs, as a library: the steps and what each
//! costs (`times`).

pub mod times;
