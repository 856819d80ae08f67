// Package durable holds the sync helpers that the storage packages share:
// SyncDir, since a file's creation, rename or hard link survives a crash
// only once its directory is synced as well, and SyncData, the fdatasync
// of a new file's bytes before they are linked into place. It imports
// nothing of the module, so every layer may use it, and it never writes
// data itself. It is a package of its own because logstore, warehouse,
// parquetfile, meta and lifecycle all need the same syncs, and none of
// them may import the others for it.
package durable
