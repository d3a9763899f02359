package main

import (
	"testing"

	"github.com/fibrilmq/fibril/conformance"
)

func TestMissingResults(t *testing.T) {
	scs := []*conformance.Scenario{{Name: "a"}, {Name: "b"}}
	res := func(runner, sc string) conformance.Result {
		return conformance.Result{Scenario: sc, Runner: runner, Status: conformance.Pass}
	}
	tests := []struct {
		name string
		in   []conformance.Result
		want []string // "runner/scenario" of the added failures
	}{
		{"complete", []conformance.Result{res("py", "a"), res("py", "b")}, nil},
		{"one missing", []conformance.Result{res("py", "a")}, []string{"py/b"}},
		{"two runners", []conformance.Result{res("py", "a"), res("js", "b")}, []string{"py/b", "js/a"}},
		{"extra scenario is not missing", []conformance.Result{res("py", "a"), res("py", "b"), res("py", "z")}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := missingResults(scs, tt.in)
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for i, r := range got {
				if r.Runner+"/"+r.Scenario != tt.want[i] || r.Status != conformance.Fail {
					t.Fatalf("result %d: %+v, want a failure for %s", i, r, tt.want[i])
				}
			}
		})
	}
}
