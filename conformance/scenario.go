package conformance

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
)

// Scenario is one conformance scenario: named steps run in order, each with
// its expectation. See README.md for the meaning of every field.
type Scenario struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Requires    []string `json:"requires,omitempty"`
	// Cluster is how many nodes the scenario's server has (0: one node,
	// not clustered); client connections are given every node's address.
	Cluster int    `json:"cluster,omitempty"`
	Steps   []Step `json:"steps"`
	File    string `json:"-"`
}

// Step is one action and what must come of it. Which fields apply depends on
// Op; unknown fields are rejected when loading, so typos fail loudly.
type Step struct {
	Op   string `json:"op"`
	Conn string `json:"conn,omitempty"`

	Topic   string          `json:"topic,omitempty"`
	Group   string          `json:"group,omitempty"`
	Subject string          `json:"subject,omitempty"`
	Config  json.RawMessage `json:"config,omitempty"`

	Data     *string           `json:"data,omitempty"`
	DataSize json.RawMessage   `json:"data_size,omitempty"`
	Headers  map[string]string `json:"headers,omitempty"`
	Key      string            `json:"key,omitempty"`
	Keys     []string          `json:"keys,omitempty"`
	MsgID    string            `json:"msg_id,omitempty"`
	Count    int               `json:"count,omitempty"`

	Max    int  `json:"max,omitempty"`
	Total  int  `json:"total,omitempty"`
	WaitMS *int `json:"wait_ms,omitempty"`

	Msg     string `json:"msg,omitempty"`
	Handle  string `json:"handle,omitempty"`
	DelayMS int    `json:"delay_ms,omitempty"`
	MS      int    `json:"ms,omitempty"`

	Sub         string   `json:"sub,omitempty"`
	Subs        []string `json:"subs,omitempty"`
	MaxInflight int      `json:"max_inflight,omitempty"`
	Ack         bool     `json:"ack,omitempty"`
	TimeoutMS   int      `json:"timeout_ms,omitempty"`
	Node        *int     `json:"node,omitempty"` // kill_node, restart_node

	Fibril  *bool          `json:"fibril,omitempty"`
	CRC     *bool          `json:"crc,omitempty"`
	Connect map[string]any `json:"connect,omitempty"`
	Text    string         `json:"text,omitempty"`
	Lines   []string       `json:"lines,omitempty"`
	Vars    []string       `json:"vars,omitempty"`

	Save   string  `json:"save,omitempty"`
	Error  string  `json:"error,omitempty"`
	Expect *Expect `json:"expect,omitempty"`
}

// Expect is what a step's result must satisfy. Absent fields are not
// checked.
type Expect struct {
	Stored              *bool          `json:"stored,omitempty"`
	Duplicate           *bool          `json:"duplicate,omitempty"`
	Partition           *int           `json:"partition,omitempty"`
	Count               *int           `json:"count,omitempty"`
	MinCount            *int           `json:"min_count,omitempty"`
	Messages            []MsgExpect    `json:"messages,omitempty"`
	DistinctData        *int           `json:"distinct_data,omitempty"`
	OrderedByKey        bool           `json:"ordered_by_key,omitempty"`
	SamePartitionPerKey bool           `json:"same_partition_per_key,omitempty"`
	DistinctPartitions  *int           `json:"distinct_partitions,omitempty"`
	MinElapsedMS        int            `json:"min_elapsed_ms,omitempty"`
	MaxElapsedMS        int            `json:"max_elapsed_ms,omitempty"`
	Fields              map[string]any `json:"fields,omitempty"`
	Names               []string       `json:"names,omitempty"`
	AbsentNames         []string       `json:"absent_names,omitempty"`
}

// MsgExpect is what one delivered message must look like.
type MsgExpect struct {
	Data          *string           `json:"data,omitempty"`
	DataSize      json.RawMessage   `json:"data_size,omitempty"`
	Subject       *string           `json:"subject,omitempty"`
	DeliveryCount *int              `json:"delivery_count,omitempty"`
	Headers       map[string]string `json:"headers,omitempty"`
	NoHeaders     []string          `json:"no_headers,omitempty"`
}

// ops lists every op a runner must implement (README.md, "Ops").
var ops = []string{
	"connect", "close", "restart_server",
	"topic_create", "topic_info", "topic_list", "topic_delete", "topic_requeue",
	"group_create", "group_info", "group_list", "group_delete",
	"publish", "publish_many", "poll",
	"ack", "nack", "reject", "extend",
	"subscribe", "receive", "receive_all", "expect_quiet", "unsubscribe",
	"raw_connect", "raw_send", "raw_expect", "raw_expect_closed",
	"kill_node", "restart_node",
}

// features a scenario may require (README.md, "Features").
var features = []string{"fibril", "headers", "crc", "restart"}

// Load reads every *.json scenario under dir in fsys, sorted by file name.
func Load(fsys fs.FS, dir string) ([]*Scenario, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("conformance: reading %s: %w", dir, err)
	}
	var out []*Scenario
	var errs []error
	names := map[string]string{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		p := path.Join(dir, e.Name())
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return nil, err
		}
		sc, err := Parse(b)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p, err))
			continue
		}
		sc.File = e.Name()
		if prev, dup := names[sc.Name]; dup {
			errs = append(errs, fmt.Errorf("%s: scenario name %q already used by %s", p, sc.Name, prev))
		}
		names[sc.Name] = e.Name()
		out = append(out, sc)
	}
	return out, errors.Join(errs...)
}

// Parse decodes and checks one scenario file.
func Parse(b []byte) (*Scenario, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var sc Scenario
	if err := dec.Decode(&sc); err != nil {
		return nil, err
	}
	if sc.Name == "" || len(sc.Steps) == 0 {
		return nil, errors.New("scenario needs a name and at least one step")
	}
	for _, f := range sc.Requires {
		if !slices.Contains(features, f) {
			return nil, fmt.Errorf("unknown feature %q", f)
		}
	}
	if sc.Cluster != 0 && sc.Cluster != 3 && sc.Cluster != 5 {
		return nil, fmt.Errorf("cluster %d: a cluster has 3 or 5 nodes", sc.Cluster)
	}
	for i, st := range sc.Steps {
		if !slices.Contains(ops, st.Op) {
			return nil, fmt.Errorf("step %d: unknown op %q", i+1, st.Op)
		}
		if st.Op == "kill_node" || st.Op == "restart_node" {
			if sc.Cluster == 0 {
				return nil, fmt.Errorf("step %d: %s needs a cluster scenario", i+1, st.Op)
			}
			if st.Node != nil && (*st.Node < 0 || *st.Node >= sc.Cluster) {
				return nil, fmt.Errorf("step %d: node %d is not one of the cluster's %d", i+1, *st.Node, sc.Cluster)
			}
		}
	}
	return &sc, nil
}
