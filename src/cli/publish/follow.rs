//! The followers of `publish`: each holds the client's watch of one
//! resource, collection or listener graph and turns its events into
//! [`Change`]s for the writer. Thin drivers: what a change means for the
//! files is the writer's, what a graph needs is `plan`'s.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::task::{AbortHandle, JoinSet};
use xdsfed::client::client::XdsClient;
use xdsfed::client::watch::{CollectionEvent, CollectionWatch, WatchEvent};
use xdsfed::core::types::{
    ClusterType, Decoded, EndpointType, ListenerType, ResourceType, RouteConfigurationType,
    ValidatingPolicyType,
};
use xdsfed::graph::ConfigGraph;
use xdsfed::policy::PolicyType;

use super::super::CliError;
use super::super::target::{
    CollectionShape, CollectionTarget, TypeArg, listener_name, watch_error,
};
use super::plan::{Followed, graph_resources};

/// What a follower tells the writer.
#[derive(Debug)]
pub(super) enum Change {
    /// The resource's current copy.
    Put {
        type_url: Arc<str>,
        name: Arc<str>,
        copy: Decoded,
    },
    /// The resource does not exist (any more).
    Gone { type_url: Arc<str>, name: Arc<str> },
    /// A watch reports an error; files stay as they are.
    Problem { name: Arc<str>, why: String },
}

/// Where followers send their changes.
pub(super) type Changes = mpsc::Sender<Change>;

/// The running followers; each ends only when the client stops.
pub(super) type Followers = JoinSet<()>;

/// Starts following `followed`: the watch is opened here, so a bad name or
/// authority is bad input before anything runs.
pub(super) fn start(
    client: &XdsClient,
    followed: &Followed,
    changes: &Changes,
    followers: &mut Followers,
) -> Result<(), CliError> {
    match followed {
        Followed::Resource(kind, name) => {
            start_in(client, *kind, name, changes, followers).map(drop)
        }
        Followed::Collection(collection) => {
            start_collection(client, collection, changes, followers)
        }
        Followed::Listener(given) => {
            let name = listener_name(client, given)?;
            // Opening it once refuses a bad name or authority up front.
            drop(
                client
                    .watch::<ListenerType>(&name)
                    .map_err(|e| watch_error(&name, &e))?,
            );
            let graph = ConfigGraph::builder(client.clone()).listener(name).start();
            followers.spawn(follow_graph(client.clone(), graph, changes.clone()));
            Ok(())
        }
    }
}

/// Watches `name` of type `T` and follows it in a task of `followers`.
fn resource<T: ResourceType>(
    client: &XdsClient,
    name: &str,
    changes: Changes,
    followers: &mut Followers,
) -> Result<AbortHandle, CliError> {
    let mut watch = client.watch::<T>(name).map_err(|e| watch_error(name, &e))?;
    Ok(followers.spawn(async move {
        let type_url: Arc<str> = Arc::from(T::TYPE_URL);
        let name = Arc::clone(&watch.key().name);
        while let Some(event) = watch.next().await {
            let change = match event {
                WatchEvent::Changed(_) => match watch.state().resource {
                    Some(copy) => Change::Put {
                        type_url: Arc::clone(&type_url),
                        name: Arc::clone(&name),
                        copy,
                    },
                    None => continue,
                },
                WatchEvent::DoesNotExist => Change::Gone {
                    type_url: Arc::clone(&type_url),
                    name: Arc::clone(&name),
                },
                WatchEvent::Error(e) | WatchEvent::AmbientError(e) => Change::Problem {
                    name: Arc::clone(&name),
                    why: e.to_string(),
                },
            };
            if changes.send(change).await.is_err() {
                return;
            }
        }
    }))
}

/// A glob or list collection, by type (list collections exist for
/// listeners and clusters only; `CollectionTarget` has checked that).
fn start_collection(
    client: &XdsClient,
    collection: &CollectionTarget,
    changes: &Changes,
    followers: &mut Followers,
) -> Result<(), CliError> {
    let name = collection.name.as_str();
    let shape = collection.shape;
    let changes = changes.clone();
    match collection.kind {
        TypeArg::Listener => collection_of::<ListenerType>(client, name, shape, changes, followers),
        TypeArg::Route => {
            collection_of::<RouteConfigurationType>(client, name, shape, changes, followers)
        }
        TypeArg::Cluster => collection_of::<ClusterType>(client, name, shape, changes, followers),
        TypeArg::Endpoint => collection_of::<EndpointType>(client, name, shape, changes, followers),
        TypeArg::Policy => collection_of::<PolicyType>(client, name, shape, changes, followers),
        TypeArg::ValidatingPolicy => {
            collection_of::<ValidatingPolicyType>(client, name, shape, changes, followers)
        }
    }
}

/// Watches the collection `name` of `T` and follows it in a task.
fn collection_of<T: ResourceType>(
    client: &XdsClient,
    name: &str,
    shape: CollectionShape,
    changes: Changes,
    followers: &mut Followers,
) -> Result<(), CliError> {
    let watch = match shape {
        CollectionShape::Glob => client.watch_collection::<T>(name),
        CollectionShape::List => client.watch_list_collection::<T>(name),
    }
    .map_err(|e| watch_error(name, &e))?;
    followers.spawn(follow_collection(watch, shape, changes));
    Ok(())
}

/// Turns a collection's events into changes: members put and removed, a
/// list collection's own copy put whenever it changed, and every member
/// written removed when the collection goes empty.
async fn follow_collection<T: ResourceType>(
    mut watch: CollectionWatch<T>,
    shape: CollectionShape,
    changes: Changes,
) {
    let own_type: Arc<str> = Arc::clone(&watch.key().type_url);
    let own_name: Arc<str> = Arc::clone(&watch.key().name);
    let member_type: Arc<str> = Arc::from(T::TYPE_URL);
    let mut own_copy: Option<Decoded> = None;
    let mut members: HashSet<Arc<str>> = HashSet::new();
    while let Some(event) = watch.next().await {
        let mut batch = Vec::new();
        if shape == CollectionShape::List
            && let Some(copy) = watch.state().resource
            && own_copy.as_ref().is_none_or(|c| c.raw() != copy.raw())
        {
            own_copy = Some(copy.clone());
            batch.push(Change::Put {
                type_url: Arc::clone(&own_type),
                name: Arc::clone(&own_name),
                copy,
            });
        }
        match event {
            CollectionEvent::Upsert { name, .. } => {
                if let Some(copy) = watch
                    .member_state(Arc::clone(&name))
                    .and_then(|s| s.resource)
                {
                    members.insert(Arc::clone(&name));
                    batch.push(Change::Put {
                        type_url: Arc::clone(&member_type),
                        name,
                        copy,
                    });
                }
            }
            CollectionEvent::Removed { name } => {
                members.remove(&name);
                batch.push(Change::Gone {
                    type_url: Arc::clone(&member_type),
                    name,
                });
            }
            CollectionEvent::Empty => {
                batch.extend(members.drain().map(|name| Change::Gone {
                    type_url: Arc::clone(&member_type),
                    name,
                }));
                if shape == CollectionShape::List && own_copy.take().is_some() {
                    batch.push(Change::Gone {
                        type_url: Arc::clone(&own_type),
                        name: Arc::clone(&own_name),
                    });
                }
            }
            CollectionEvent::Listed { .. } => {}
            CollectionEvent::Error { name, error } => batch.push(Change::Problem {
                name,
                why: error.to_string(),
            }),
        }
        for change in batch {
            if changes.send(change).await.is_err() {
                return;
            }
        }
    }
}

/// Follows what a listener's graph needs: each resource of each snapshot
/// gets a follower of its own; one the graph no longer needs is no longer
/// followed (its file stays: it still exists on its server).
async fn follow_graph(client: XdsClient, mut graph: ConfigGraph, changes: Changes) {
    let mut followers = Followers::new();
    let mut following: HashMap<(TypeArg, Arc<str>), AbortHandle> = HashMap::new();
    let mut next = graph.ready().await;
    while let Ok(snapshot) = next {
        let needed: BTreeSet<(TypeArg, Arc<str>)> = graph_resources(&snapshot);
        following.retain(|key, task| {
            let keep = needed.contains(key);
            if !keep {
                task.abort();
            }
            keep
        });
        for (kind, name) in needed {
            if following.contains_key(&(kind, Arc::clone(&name))) {
                continue;
            }
            match start_in(&client, kind, &name, &changes, &mut followers) {
                Ok(task) => {
                    following.insert((kind, name), task);
                }
                Err(e) => {
                    let why = e.to_string();
                    if changes.send(Change::Problem { name, why }).await.is_err() {
                        return;
                    }
                }
            }
        }
        next = tokio::select! {
            next = graph.changed() => next,
            // Finished followers are reaped; none ends while the client runs.
            Some(_) = followers.join_next(), if !followers.is_empty() => Ok(snapshot),
        };
    }
}

/// Watches the resource `name` of `kind` and follows it in a task of
/// `followers`, whose handle is returned.
fn start_in(
    client: &XdsClient,
    kind: TypeArg,
    name: &str,
    changes: &Changes,
    followers: &mut Followers,
) -> Result<AbortHandle, CliError> {
    let changes = changes.clone();
    match kind {
        TypeArg::Listener => resource::<ListenerType>(client, name, changes, followers),
        TypeArg::Route => resource::<RouteConfigurationType>(client, name, changes, followers),
        TypeArg::Cluster => resource::<ClusterType>(client, name, changes, followers),
        TypeArg::Endpoint => resource::<EndpointType>(client, name, changes, followers),
        TypeArg::Policy => resource::<PolicyType>(client, name, changes, followers),
        TypeArg::ValidatingPolicy => {
            resource::<ValidatingPolicyType>(client, name, changes, followers)
        }
    }
}
