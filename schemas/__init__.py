"""SQL DDL and JSON Schemas of pcache's on-disk format (shipped as the data package ``store.schemas``)."""
