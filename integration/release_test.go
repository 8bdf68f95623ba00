package integration

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// releaseTargets are the GOOS/GOARCH pairs scripts/release.sh builds by default;
// windows is packed as zip.
var releaseTargets = []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64", "windows/amd64", "windows/arm64"}

// releaseRepo is the module root: go test runs in integration/.
func releaseRepo(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	return root
}

// runRelease runs scripts/release.sh into out with version stamped and the extra
// environment, and returns the commit it stamped.
func runRelease(t *testing.T, out, version string, env ...string) string {
	t.Helper()
	for _, tool := range []string{"bash", "git", "tar", "gzip", "zip"} {
		_, err := exec.LookPath(tool)
		require.NoError(t, err, "scripts/release.sh needs %s", tool)
	}
	root := releaseRepo(t)
	commit := "0123456789abcdef0123456789abcdef01234567"
	if head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output(); err == nil {
		commit = strings.TrimSpace(string(head))
	}
	cmd := exec.Command("bash", filepath.Join(root, "scripts", "release.sh"), "-o", out, version)
	cmd.Env = append(os.Environ(), append([]string{"COMMIT=" + commit}, env...)...)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	require.NoError(t, cmd.Run(), "scripts/release.sh:\n%s", log.String())
	t.Logf("scripts/release.sh:\n%s", log.String())
	return commit
}

// TestReleaseArchives builds every release archive and checks what a user downloads:
// SHA256SUMS matches, each archive holds LICENSE, README.md and a binary for its
// platform (by its build info) stamped with the version and commit, and each has its
// SBOM.
func TestReleaseArchives(t *testing.T) {
	requireSlow(t)
	const version = "9.9.9-release.test"
	out := t.TempDir()
	commit := runRelease(t, out, version)
	license, err := os.ReadFile(filepath.Join(releaseRepo(t), "LICENSE"))
	require.NoError(t, err)

	sums := readSHA256SUMS(t, filepath.Join(out, "SHA256SUMS"))
	var want []string
	for _, target := range releaseTargets {
		goos, goarch, _ := strings.Cut(target, "/")
		name := "mcp-aggregator_" + version + "_" + goos + "_" + goarch
		archive, exe := name+".tar.gz", "mcp-aggregator"
		if goos == "windows" {
			archive, exe = name+".zip", "mcp-aggregator.exe"
		}
		want = append(want, archive, name+".cdx.json")

		t.Run(goos+"_"+goarch, func(t *testing.T) {
			files := readArchive(t, filepath.Join(out, archive))
			assert.ElementsMatch(t, []string{name + "/LICENSE", name + "/README.md", name + "/" + exe}, releaseNames(files),
				"one directory named like the archive, holding the binary, LICENSE and README.md")
			assert.Equal(t, string(license), string(files[name+"/LICENSE"]))
			assert.NotEmpty(t, files[name+"/README.md"])

			// Every binary, whatever its platform, carries its build settings.
			bin := filepath.Join(t.TempDir(), exe)
			require.NoError(t, os.WriteFile(bin, files[name+"/"+exe], 0o755))
			info, err := buildinfo.ReadFile(bin)
			require.NoError(t, err, "the build info of %s", archive)
			settings := map[string]string{}
			for _, s := range info.Settings {
				settings[s.Key] = s.Value
			}
			assert.Equal(t, goos, settings["GOOS"])
			assert.Equal(t, goarch, settings["GOARCH"])
			assert.Equal(t, "0", settings["CGO_ENABLED"])
			assert.Equal(t, "true", settings["-trimpath"])
			// -trimpath keeps -ldflags out of the build info, so the stamps are looked
			// for as the strings -X put into the binary's data.
			assert.True(t, bytes.Contains(files[name+"/"+exe], []byte(version)), "the version is stamped into %s", archive)
			assert.True(t, bytes.Contains(files[name+"/"+exe], []byte(commit)), "the commit is stamped into %s", archive)

			// The one this machine can run says so itself.
			if runtime.GOOS == goos && runtime.GOARCH == goarch {
				stdout, err := exec.Command(bin, "version").Output()
				require.NoError(t, err)
				assert.Regexp(t, `^mcp-aggregator `+regexp.QuoteMeta(version)+`\ncommit: `+commit+`\ngo: go\S+ `+goos+`/`+goarch+`\n$`, string(stdout))
			}

			checkSBOM(t, filepath.Join(out, name+".cdx.json"), version, goos, goarch)
		})
	}
	assert.ElementsMatch(t, want, releaseNames(sums), "SHA256SUMS lists every archive and SBOM, and nothing else")
	for file, sum := range sums {
		data, err := os.ReadFile(filepath.Join(out, file))
		if assert.NoError(t, err, "SHA256SUMS lists %s", file) {
			got := sha256.Sum256(data)
			assert.Equal(t, sum, hex.EncodeToString(got[:]), "the SHA-256 of %s", file)
		}
	}
	if _, err := exec.LookPath("sha256sum"); err == nil {
		check := exec.Command("sha256sum", "--check", "--strict", "SHA256SUMS")
		check.Dir = out
		res, err := check.CombinedOutput()
		assert.NoError(t, err, "sha256sum --check, as docs/install.md tells users:\n%s", res)
	}
}

// readSHA256SUMS reads the lines "HASH  FILE" of sha256sum.
func readSHA256SUMS(t *testing.T, file string) map[string]string {
	t.Helper()
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	sums := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		require.True(t, ok, "a SHA256SUMS line: %q", sc.Text())
		require.Len(t, sum, 64, "a SHA256SUMS line: %q", sc.Text())
		sums[name] = sum
	}
	require.NoError(t, sc.Err())
	return sums
}

// readArchive returns the regular files of a .tar.gz or .zip by name.
func readArchive(t *testing.T, file string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	if strings.HasSuffix(file, ".zip") {
		zr, err := zip.OpenReader(file)
		require.NoError(t, err)
		defer zr.Close()
		for _, f := range zr.File {
			if f.FileInfo().IsDir() {
				continue
			}
			r, err := f.Open()
			require.NoError(t, err)
			data, err := io.ReadAll(r)
			require.NoError(t, err)
			r.Close()
			files[f.Name] = data
		}
		return files
	}
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	gz, err := gzip.NewReader(f)
	require.NoError(t, err)
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		if h.Typeflag != tar.TypeReg {
			continue
		}
		assert.Equal(t, 0, h.Uid, "%s: entries belong to no user of the build machine", h.Name)
		if path.Base(h.Name) == "mcp-aggregator" {
			assert.Equal(t, int64(0o755), h.Mode&0o777, "%s is executable", h.Name)
		}
		data, err := io.ReadAll(tr)
		require.NoError(t, err)
		files[h.Name] = data
	}
	return files
}

// checkSBOM checks that file is a CycloneDX JSON SBOM of the binary of goos/goarch at
// version, listing the modules it is built from.
func checkSBOM(t *testing.T, file, version, goos, goarch string) {
	t.Helper()
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	var bom struct {
		BOMFormat   string `json:"bomFormat"`
		SpecVersion string `json:"specVersion"`
		Metadata    struct {
			Component struct {
				Name    string `json:"name"`
				Version string `json:"version"`
				PURL    string `json:"purl"`
			} `json:"component"`
		} `json:"metadata"`
		Components []struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(data, &bom), "%s is JSON", file)
	assert.Equal(t, "CycloneDX", bom.BOMFormat)
	assert.NotEmpty(t, bom.SpecVersion)
	assert.Equal(t, "github.com/mcp-aggregator/mcp-aggregator", bom.Metadata.Component.Name)
	assert.Equal(t, version, bom.Metadata.Component.Version)
	assert.Contains(t, bom.Metadata.Component.PURL, "goos="+goos)
	assert.Contains(t, bom.Metadata.Component.PURL, "goarch="+goarch)
	var names []string
	for _, c := range bom.Components {
		names = append(names, c.Name)
	}
	for _, dep := range []string{"github.com/mark3labs/mcp-go", "gopkg.in/yaml.v3", "std"} {
		assert.Contains(t, names, dep, "%s lists %s", file, dep)
	}
}

func releaseNames[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
