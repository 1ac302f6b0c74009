"""Dev Container Features (containers.dev "Features"): ids, metadata and options, install order, image layers.

source.py parses a Feature id, model.py a Feature's devcontainer-feature.json and the options the config gives it,
order.py computes the spec's install order, resolve.py turns a config's "features" into ordered, resolved Features,
layer.py installs them as image layers on the host's Docker engine, contributions.py merges what they add to the
instance's run options. fetch.py / lockfile.py (OCI and tarball Features) belong to the distribution side.
"""
