// Package wire is the format of ingested events on both sides of the bus, and the one JSON scanner
// it is read with: the events clients send (Input, and the body of a batch), the bus message the
// API publishes and the loader receives (Message), and the numeric properties of a stored payload
// as the warehouse's rollups read them.
//
// Every reader here is a fast path for the layout its writers use, which gives up (false) on
// anything else so that encoding/json decides; where it answers, it answers as encoding/json
// would. Each has a differential test against encoding/json and a fuzz target beside it.
package wire
