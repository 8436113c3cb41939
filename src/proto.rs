//! The project's own protobuf APIs, compiled from `proto/` by `build.rs`.

/// `xdsfed.greeter.v1`: the greeting service that the examples and tests of
/// `xdsfed-tonic` call through `xds:///` channels; each reply names its
/// backend.
pub mod greeter {
    /// Version 1.
    #[allow(missing_docs, clippy::all)]
    pub mod v1 {
        tonic::include_proto!("xdsfed.greeter.v1");
    }
}

/// `xdsfed.policy.v1`: the example custom resource type.
pub mod policy {
    /// Version 1.
    #[allow(missing_docs, clippy::all)]
    pub mod v1 {
        tonic::include_proto!("xdsfed.policy.v1");
    }
}

/// `xdsfed.testbed.v1`: the testbed control API.
pub mod testbed {
    /// Version 1.
    #[allow(missing_docs, clippy::all)]
    pub mod v1 {
        tonic::include_proto!("xdsfed.testbed.v1");
    }
}
