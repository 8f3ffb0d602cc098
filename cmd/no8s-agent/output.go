package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"sigs.k8s.io/yaml"

	"github.com/no8s/no8s-agent/manifest"
)

// printObjects writes objs as JSON or YAML, or calls table to write a table.
func printObjects(w io.Writer, format string, objs any, table func(tw *tabwriter.Writer)) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(objs)
	case "yaml":
		b, err := yaml.Marshal(objs)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	case "table", "wide", "":
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		table(tw)
		return tw.Flush()
	}
	return fmt.Errorf("-o must be table, wide, json or yaml, not %q", format)
}

// orDash writes empty values as "-" so that table columns stay aligned,
// and escapes control characters, so that a value (a file name, say)
// cannot break the table or forge rows.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return manifest.EscapeControl(s)
}
