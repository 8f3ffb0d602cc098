package release

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
)

// writeSBOM writes the CycloneDX SBOM of the binary bin to out with
// cyclonedx-gomod, a tool of this module (go.mod's tool directive, built
// from the module cache): its bin mode reads the module versions and
// hashes the go command recorded in the binary, so the SBOM lists what was
// linked into it for that platform and nothing else, with the Go standard
// library. The serial number is derived from the binary's digest and the
// timestamp left out, so the same binary gives the same document.
func writeSBOM(ctx context.Context, o Options, bin, out string) error {
	data, err := os.ReadFile(bin)
	if err != nil {
		return fmt.Errorf("release: %w", err)
	}
	cmd := exec.CommandContext(ctx, o.Go, "tool", "cyclonedx-gomod", "bin",
		"-json", "-std", "-notimestamp", "-serial", digestUUID(data),
		"-version", o.Version, "-output", out, bin)
	cmd.Dir = o.Dir
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("release: cyclonedx-gomod bin %s: %w\n%s", bin, err, stderr.Bytes())
	}
	return nil
}

// digestUUID returns a UUID (version 8, RFC 9562's custom one) made of the
// SHA-256 digest of data.
func digestUUID(data []byte) string {
	d := sha256.Sum256(data)
	d[6] = d[6]&0x0f | 0x80
	d[8] = d[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", d[0:4], d[4:6], d[6:8], d[8:10], d[10:16])
}
