"""The protocol face: paths, headers, auth, schemas, the error envelope, and clients."""
