// Package catalog holds the exported tool catalog: an immutable snapshot of
// every tool the aggregator exports, its owner server and upstream name, and
// tools/list's result rendered once per commit; and search mode's view of
// it, the short tools/list and the index behind mcp_search_tools. Values in,
// values out: the proxy builds a new Catalog and view on each commit and
// swaps them in; readers never lock.
package catalog
