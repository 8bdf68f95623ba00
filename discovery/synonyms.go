package discovery

// synonyms are the words people and models use for the same thing in the
// vocabulary of tools: a request in one finds tools described in the
// other. Kept short and general; each entry is a word and the words it
// also searches for.
var synonyms = map[string][]string{
	"folder":    {"directory"},
	"directory": {"folder"},
	"dir":       {"directory"},
	"repo":      {"repository"},
	"pr":        {"pull", "request"},
	"mr":        {"merge", "request"},
	"db":        {"database"},
	"k8s":       {"kubernetes"},
	"js":        {"javascript"},
	"env":       {"environment"},
	"docs":      {"documentation"},
	"make":      {"create"},
	"remove":    {"delete"},
	"delete":    {"remove"},
	"erase":     {"delete"},
	"find":      {"search"},
	"lookup":    {"search"},
	"execute":   {"run"},
	"run":       {"execute"},
	"fetch":     {"get", "retrieve"},
	"download":  {"get", "fetch"},
	"show":      {"get", "list"},
	"link":      {"url"},
	"url":       {"link"},
	"picture":   {"image", "screenshot"},
	"photo":     {"image"},
	"edit":      {"update", "modify"},
	"change":    {"update", "modify"},
	"modify":    {"update", "edit"},
}
