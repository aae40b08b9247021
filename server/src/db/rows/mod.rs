//! Row types shared by the SQLite and Postgres backends, one module per
//! area: the same columns decode the same way on both.

pub(crate) mod assignments;
pub(crate) mod ats;
pub(crate) mod jobs;
pub(crate) mod meter;
pub(crate) mod packet_audits;
pub(crate) mod packets;
pub(crate) mod submissions;
pub(crate) mod users;
pub(crate) mod witness;
