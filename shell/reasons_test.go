package shell

import (
	"fmt"
	"testing"

	"github.com/undosh/undosh/policy"
)

// The journal keeps the reasons that decided a step, then a few others,
// and counts the rest.
func TestKeptReasons(t *testing.T) {
	t.Parallel()
	few := []policy.Reason{{Rule: "a", Class: policy.None}, {Rule: "b", Class: policy.Git}}
	if got, left := keptReasons(few, policy.Git, policy.Run); len(got) != 2 || left != 0 {
		t.Errorf("few reasons: %v, %d left", got, left)
	}
	var many []policy.Reason
	for i := range 600 {
		many = append(many, policy.Reason{Rule: fmt.Sprint("none-", i), Class: policy.None})
	}
	many = append(many, policy.Reason{Rule: "decides", Class: policy.Git})
	got, left := keptReasons(many, policy.Git, policy.Run)
	if len(got) != maxReasons || got[0].Rule != "decides" || left != len(many)-maxReasons {
		t.Errorf("many reasons: kept %d (first %q), %d left", len(got), got[0].Rule, left)
	}
	deny := append(many[:0:0], many...)
	deny = append(deny, policy.Reason{Rule: "push", Class: policy.None, Verdict: policy.Deny})
	got, _ = keptReasons(deny, policy.Git, policy.Deny)
	if len(got) != maxReasons || got[1].Rule != "push" {
		t.Errorf("a denial is kept: %v", got[:2])
	}
}
