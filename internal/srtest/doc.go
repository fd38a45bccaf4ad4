// Package srtest gives tests a schema registry: franz-go's in-memory
// srfake served on a loopback port the test can stop and start again
// (the schemas survive: the job meets an outage, not a new registry). It
// answers format=serialized as Confluent's registry does, for
// Confluent's Protobuf deserializers.
package srtest
