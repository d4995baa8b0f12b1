package ingest

// PartitionOf exposes the loader's partition of an event to the external tests.
var PartitionOf = partitionOf
