//! The filesystem source's IO: a driver that watches the file's directory,
//! lets a burst of changes settle, reads the file again (bounded by
//! `max_message_size`) and hands the bytes to its
//! [`FileSession`](xdsfed_core::source::file::FileSession).

mod connection;
mod driver;

pub(crate) use connection::FileConnection;
