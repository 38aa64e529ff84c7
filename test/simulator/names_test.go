package simulator

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

func TestInstanceIPAndLauncherName(t *testing.T) {
	network := netip.MustParsePrefix(PodNetwork)
	seen := map[string]bool{}
	for _, uid := range []types.UID{"a", "b", "6f1c9a52-7d0e-4c3b-9b7e-2f4d1a8e5c01", "6f1c9a52-7d0e-4c3b-9b7e-2f4d1a8e5c02"} {
		ip := InstanceIP(uid)
		if ip != InstanceIP(uid) {
			t.Errorf("InstanceIP(%s) not deterministic", uid)
		}
		addr := netip.MustParseAddr(ip)
		if !network.Contains(addr) || addr == network.Addr() {
			t.Errorf("InstanceIP(%s) = %s, not a host address of %s", uid, ip, PodNetwork)
		}
		if seen[ip] {
			t.Errorf("InstanceIP(%s) = %s collides", uid, ip)
		}
		seen[ip] = true
		name := LauncherPodName("web", uid)
		if len(name) != len("virt-launcher-web-")+5 || name != LauncherPodName("web", uid) {
			t.Errorf("LauncherPodName(web, %s) = %q", uid, name)
		}
	}
	long := string(make([]byte, 300))
	if n := LauncherPodName(long, "x"); len(n) > 253 {
		t.Errorf("launcher name of a long VM is %d characters", len(n))
	}
}

func TestShouldRun(t *testing.T) {
	cases := map[string]struct {
		running     *bool
		strategy    *kubevirtv1.VirtualMachineRunStrategy
		hasInstance bool
		want        bool
	}{
		"always":               {strategy: ptr.To(kubevirtv1.RunStrategyAlways), want: true},
		"rerun on failure":     {strategy: ptr.To(kubevirtv1.RunStrategyRerunOnFailure), want: true},
		"halted":               {strategy: ptr.To(kubevirtv1.RunStrategyHalted), hasInstance: true, want: false},
		"manual keeps running": {strategy: ptr.To(kubevirtv1.RunStrategyManual), hasInstance: true, want: true},
		"manual keeps stopped": {strategy: ptr.To(kubevirtv1.RunStrategyManual), want: false},
		"legacy running":       {running: ptr.To(true), want: true},
		"legacy not running":   {running: ptr.To(false), hasInstance: true, want: false},
		"neither set":          {want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			vm := &kubevirtv1.VirtualMachine{Spec: kubevirtv1.VirtualMachineSpec{Running: tc.running, RunStrategy: tc.strategy}}
			if diff := cmp.Diff(tc.want, ShouldRun(vm, tc.hasInstance)); diff != "" {
				t.Errorf("ShouldRun (-want,+got):\n%s", diff)
			}
		})
	}
}
