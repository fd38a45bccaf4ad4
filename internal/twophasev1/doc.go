// Package twophasev1 is the two-phase commit Protocol and its synchronous
// Driver as they were before twophase.Machine merged them with the
// checkpoint coordinator. It exists only while the engine moves onto the
// Machine, and goes with the Driver.
package twophasev1
