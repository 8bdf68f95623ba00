// Package catalog holds the exported catalog: an immutable snapshot of
// every tool the aggregator exports, its owner server and upstream name, and
// tools/list's result rendered once per commit; the surface beyond tools
// (resources, resource templates and prompts, with the server owning each
// and their list results rendered once); the plan that turns a
// server's upstream tools into its entries under the naming rules of its
// config; and search mode's view of the catalog, the short tools/list and
// the index behind mcp_search_tools. Values in, values out: the proxy builds
// a new Catalog and view on each commit and swaps them in; readers never
// lock.
package catalog
