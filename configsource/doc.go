// Package configsource decides which config a command reads, and reads it:
// the --config flags, else the files MCP_AGGREGATOR_CONFIG lists, else the
// first default file of the working directory, else the built-in demo
// config; with the notes the user should read about that choice, and every
// secret of what it loads taught to the set the logs are scrubbed of.
// Every command finds its config this one way.
package configsource
