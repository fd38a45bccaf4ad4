// Package config turns a job's YAML file into a typed, validated Config.
//
// Loading happens in three steps, in this order:
//
//  1. ${VAR} and ${VAR:-default} are replaced from the environment in the
//     raw text ($$ is a literal $), so a value may come from anywhere;
//  2. the YAML is parsed into a node tree that keeps line and column of
//     every key and value;
//  3. the tree is decoded into Config strictly (unknown fields, wrong types
//     and bad durations are errors), defaults are applied, and the whole
//     job is validated.
//
// Every problem found is reported at once, as Errors, each as
// FILE:LINE:COL: path.to.field: message, so a user fixes a file in one pass.
// A Config returned without error is complete: every default is filled in.
// It remembers where each field was written (Config.Position), so that
// problems found later, such as an expression that does not compile, are
// reported the same way (Config.Errorf). A check given to Load or Parse
// (WithCheck) finds those with every other problem of the file.
package config
