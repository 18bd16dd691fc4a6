package policy_test

import (
	"testing"

	"github.com/undosh/undosh/policy"
)

// familyCase is a command (its words, as the parser would give them) and
// the class the default policy must give it.
type familyCase struct {
	in     string
	want   policy.Class
	egress bool
}

func decideFamily(t *testing.T, tests []familyCase, edit func(*policy.Command)) {
	t.Helper()
	p := policy.Default()
	ctx := policy.Context{Cwd: "/work/proj", Roots: []string{"/work/proj"}, Home: "/home/u"}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			c := cmd("1:1", tc.in)
			if edit != nil {
				edit(&c)
			}
			d := p.Decide(one(c), ctx)
			if d.Class != tc.want || d.Egress != tc.egress {
				t.Errorf("%q: class %s egress %v, want %s egress %v\n%v", tc.in, d.Class, d.Egress, tc.want, tc.egress, d.Reasons)
			}
		})
	}
}

// TestFamilyVersionRule: the version rule answers --version and --help for
// every program, but -v and -V only for programs whose -v or -V is the
// version; to the others they are verbose and their own rules decide.
func TestFamilyVersionRule(t *testing.T) {
	t.Parallel()
	decideFamily(t, []familyCase{
		{in: "pytest -v", want: policy.Git},
		{in: "pytest --version", want: policy.Git}, // loads conftest.py
		{in: "ldconfig -v", want: policy.Fork},
		{in: "ninja -v", want: policy.Git},
		{in: "tox -v", want: policy.Git},
		{in: "depmod -v", want: policy.Fork},
		{in: "ldconfig -V", want: policy.None},
		{in: "node -v", want: policy.None},
		{in: "java -version", want: policy.None},
		{in: "git --version", want: policy.None},
		{in: "ninja --version", want: policy.None},
		{in: "mvn -V", want: policy.Git}, // shows the version and builds
	}, nil)
}

// TestFamilyGluedOptions: option patterns of a getopt rule match glued
// values, clusters and abbreviations; ip verbs match as ip abbreviates
// them.
func TestFamilyGluedOptions(t *testing.T) {
	t.Parallel()
	decideFamily(t, []familyCase{
		{in: "date -s2020-01-01", want: policy.Fork},
		{in: "date -us 10:00", want: policy.Fork},
		{in: "date --se=10:00", want: policy.Fork},
		{in: "date +%s", want: policy.None},
		{in: "sysctl -p/etc/sysctl.conf", want: policy.Fork},
		{in: "sysctl -ep", want: policy.Fork},
		{in: "sysctl --lo=/etc/x", want: policy.Fork},
		{in: "sysctl -a", want: policy.None},
		{in: "dmesg -Tc", want: policy.Fork},
		{in: "dmesg -T", want: policy.None},
		{in: "hostname -F/etc/hostname", want: policy.Fork},
		{in: "ip a a 10.0.0.1/24 dev eth0", want: policy.Fork},
		{in: "ip l s eth0 down", want: policy.Fork},
		{in: "ip r a default via 10.0.0.1", want: policy.Fork},
		{in: "ip a s", want: policy.None},
		{in: "ip route get 1.1.1.1", want: policy.None},
	}, func(c *policy.Command) { c.Sub = subAfterOptions(c.Argv) })
}

// subAfterOptions is the parser's subcommand index for programs with no
// value options before it.
func subAfterOptions(argv []policy.Arg) int {
	for i := 1; i < len(argv); i++ {
		if v := argv[i].Value; len(v) < 2 || v[0] != '-' {
			return i
		}
	}
	return 0
}

// TestFamilyNetworkListings: iptables -L, ifconfig and route list before
// the machine rule classes them fork.
func TestFamilyNetworkListings(t *testing.T) {
	t.Parallel()
	decideFamily(t, []familyCase{
		{in: "iptables -L", want: policy.None},
		{in: "iptables -nvL", want: policy.None},
		{in: "iptables -L -Z", want: policy.Fork},
		{in: "iptables -A INPUT -j DROP", want: policy.Fork},
		{in: "ifconfig", want: policy.None},
		{in: "ifconfig -a", want: policy.None},
		{in: "ifconfig eth0", want: policy.None},
		{in: "ifconfig eth0 up", want: policy.Fork},
		{in: "ifconfig eth0 -arp", want: policy.Fork},
		{in: "route -n", want: policy.None},
		{in: "route add default gw 10.0.0.1", want: policy.Fork},
	}, func(c *policy.Command) { c.Sub = subAfterOptions(c.Argv) })
}

// TestFamilyCloudCredentials: get-credentials writes ~/.kube/config.
func TestFamilyCloudCredentials(t *testing.T) {
	t.Parallel()
	decideFamily(t, []familyCase{
		{in: "gcloud container clusters get-credentials c1", want: policy.Fork, egress: true},
		{in: "gcloud beta container clusters get-credentials c1", want: policy.Fork, egress: true},
		{in: "az aks get-credentials -g rg -n c1", want: policy.Fork, egress: true},
		{in: "aws eks update-kubeconfig --name c1", want: policy.Fork, egress: true},
		{in: "gcloud container clusters describe c1", want: policy.None, egress: true},
	}, func(c *policy.Command) { c.Sub = subAfterOptions(c.Argv) })
}

// TestFamilyScriptList: npm run with no script lists the scripts.
func TestFamilyScriptList(t *testing.T) {
	t.Parallel()
	decideFamily(t, []familyCase{
		{in: "npm run", want: policy.None},
		{in: "pnpm run", want: policy.None},
		{in: "npm run build", want: policy.Git},
		{in: "yarn run", want: policy.Git}, // yarn 1 asks which to run
	}, func(c *policy.Command) { c.Sub = subAfterOptions(c.Argv) })
}

// TestFamilyStandardDevices: the standard devices take stream writes
// only; a write that replaces, removes or changes one is fork.
func TestFamilyStandardDevices(t *testing.T) {
	t.Parallel()
	p := policy.Default()
	ctx := policy.Context{Cwd: "/work/proj", Roots: []string{"/work/proj"}, Home: "/home/u"}
	for _, tc := range []struct {
		path   string
		stream bool
		want   policy.Class
	}{
		{"/dev/null", true, policy.None},
		{"/dev/stdout", true, policy.None},
		{"/dev/fd/1", true, policy.None},
		{"/dev/null", false, policy.Fork},
		{"/dev/stdout", false, policy.Fork},
		{"/dev/fd/1", false, policy.Fork},
		{"/work/proj/x", false, policy.Git},
	} {
		c := cmd("1:1", "tee "+tc.path)
		c.Writes = []policy.Write{{Path: tc.path, Resolved: true, Stream: tc.stream}}
		if d := p.Decide(one(c), ctx); d.Class != tc.want {
			t.Errorf("write %s (stream %v): class %s, want %s", tc.path, tc.stream, d.Class, tc.want)
		}
	}
}
