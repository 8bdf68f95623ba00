// Package catalog holds the exported tool catalog: an immutable snapshot of
// every tool the aggregator exports, its owner server and upstream name, and
// tools/list's result rendered once per commit. Values in, values out: the
// proxy builds a new Catalog on each commit and swaps it in; readers never
// lock.
package catalog
