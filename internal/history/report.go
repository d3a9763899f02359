package history

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteTable prints r as a summary table: the run's totals, then one row
// per category with its count and first examples, then the verdict.
func (r *Result) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "ops\t%d\n", r.Ops)
	fmt.Fprintf(tw, "published\t%d\n", r.Published)
	fmt.Fprintf(tw, "confirmed\t%d\n", r.Confirmed)
	fmt.Fprintf(tw, "delivered\t%d\n", r.Delivered)
	fmt.Fprintf(tw, "acked\t%d\n", r.Acked)
	fmt.Fprintf(tw, "dead-lettered\t%d\n", r.DeadLettered)
	fmt.Fprintf(tw, "faults\t%s\n", r.faultList())
	fmt.Fprintf(tw, "\t\n")
	for _, c := range r.Counts {
		extra := ""
		if c.Name == Lost {
			extra = fmt.Sprintf(" (prefix %d, middle %d, suffix %d)", r.LostPrefix, r.LostMiddle, r.LostSuffix)
		}
		if r.Incomplete && (c.Name == Lost || c.Name == Unsettled) {
			extra = " (not judged: no final drain)"
		}
		fmt.Fprintf(tw, "%s\t%d%s\n", c.Name, c.N, extra)
		for _, e := range c.Examples {
			fmt.Fprintf(tw, "\t  %s\n", e)
		}
	}
	verdict := "valid"
	switch {
	case r.Incomplete:
		verdict = "INCOMPLETE (the history has no \"done\" phase)"
	case !r.Valid():
		verdict = "INVALID"
	}
	fmt.Fprintf(tw, "\t\nverdict\t%s\n", verdict)
	return tw.Flush()
}

// Summary is r in one line: totals, each category, the verdict.
func (r *Result) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "confirmed=%d delivered=%d acked=%d dead=%d faults=[%s]", r.Confirmed, r.Delivered, r.Acked, r.DeadLettered, r.faultList())
	for _, c := range r.Counts {
		fmt.Fprintf(&b, " %s=%d", c.Name, c.N)
	}
	fmt.Fprintf(&b, " valid=%v", r.Valid())
	return b.String()
}

func (r *Result) faultList() string {
	var parts []string
	for _, k := range sortedKeys(r.Faults) {
		parts = append(parts, fmt.Sprintf("%s:%d", k, r.Faults[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}
