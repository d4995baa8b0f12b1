package load

// PartitionOf exposes the loader's partition of an event to the external tests.
var PartitionOf = partitionOf

// DefaultMaxBatchEvents is the loader's batch bound, which BenchmarkLoadCeiling's batches follow.
const DefaultMaxBatchEvents = defaultMaxBatchEvents
