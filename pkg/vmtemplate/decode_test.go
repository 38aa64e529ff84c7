package vmtemplate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

func seed(t *testing.T, name string) []byte {
	t.Helper()
	y, err := os.ReadFile(filepath.Join("..", "..", "test", "testdata", "seed000", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	j, err := yaml.YAMLToJSON(y)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

const minimal = `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","spec":{"template":{"spec":{"domain":{"memory":{"guest":"2Gi"},"devices":{}}}}}}`

func TestDecode(t *testing.T) {
	path := field.NewPath("spec", "template")
	cases := map[string]struct {
		raw  string
		want []string // "field: detail" fragments, in order
	}{
		"minimal":         {raw: minimal},
		"seed rhel9":      {raw: string(seed(t, "rhel9"))},
		"seed windows10":  {raw: string(seed(t, "windows10"))},
		"seed server2019": {raw: string(seed(t, "server2019"))},
		"unknown field below a custom UnmarshalJSON": {
			raw:  strings.Replace(minimal, `"devices":{}`, `"devices":{},"cpuu":{"cores":2}`, 1),
			want: []string{"spec.template.spec.template.spec.domain.cpuu: Invalid value: \"cpuu\": unknown field"},
		},
		"unknown top-level field": {
			raw:  strings.Replace(minimal, `"kind"`, `"spc":{},"kind"`, 1),
			want: []string{"spec.template.spc: Invalid value: \"spc\": unknown field"},
		},
		"unknown field in a list item": {
			raw: strings.Replace(minimal, `"devices":{}`,
				`"devices":{"disks":[{"name":"root","disk":{"buss":"virtio"}}]}`, 1),
			want: []string{"spec.template.spec.template.spec.domain.devices.disks[0].disk.buss: Invalid value: \"buss\": unknown field"},
		},
		"unknown field in a data volume template": {
			raw: strings.Replace(minimal, `"template":`,
				`"dataVolumeTemplates":[{"metadata":{"name":"d"},"spec":{"sourc":{}}}],"template":`, 1),
			want: []string{"spec.template.spec.dataVolumeTemplates[0].spec.sourc: Invalid value: \"sourc\": unknown field"},
		},
		"string for an integer": {
			raw:  strings.Replace(minimal, `"devices":{}`, `"devices":{},"cpu":{"cores":"four"}`, 1),
			want: []string{"spec.template.spec.template.spec.domain.cpu.cores: Invalid value: \"\": wrong type: want integer"},
		},
		"no memory": {
			raw:  strings.Replace(minimal, `"memory":{"guest":"2Gi"},`, ``, 1),
			want: []string{"spec.template.spec.template.spec.domain.memory.guest: Required value"},
		},
		"interface without network": {
			raw:  strings.Replace(minimal, `"devices":{}`, `"devices":{"interfaces":[{"name":"vlan","bridge":{}}]}`, 1),
			want: []string{"spec.template.spec.template.spec.domain.devices.interfaces[0].name: Invalid value: \"vlan\": no network"},
		},
		"not a VirtualMachine": {
			raw:  strings.Replace(minimal, `"kind":"VirtualMachine"`, `"kind":"VirtualMachineInstance"`, 1),
			want: []string{"spec.template.kind: Invalid value: \"VirtualMachineInstance\": must be VirtualMachine"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, errs := Decode([]byte(tc.raw), path)
			var got []string
			for _, e := range errs {
				got = append(got, e.Error())
			}
			if len(got) != len(tc.want) {
				t.Fatalf("errors (-want,+got):\n%s", cmp.Diff(tc.want, got))
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tc.want[i]) {
					t.Errorf("error %d = %q, want prefix %q", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestShape(t *testing.T) {
	cases := map[string]struct {
		raw      string
		cpu, mem string
	}{
		"rhel9: 4 cores, 16Gi guest":   {raw: string(seed(t, "rhel9")), cpu: "4", mem: "16Gi"},
		"server2019: 8 cores, 32Gi":    {raw: string(seed(t, "server2019")), cpu: "8", mem: "32Gi"},
		"requests win over the domain": {raw: strings.Replace(minimal, `"devices":{}`, `"devices":{},"cpu":{"cores":4},"resources":{"requests":{"cpu":"1500m","memory":"3Gi"}}`, 1), cpu: "1500m", mem: "3Gi"},
		"no cpu: one vCPU":             {raw: minimal, cpu: "1", mem: "2Gi"},
		"sockets x cores x threads":    {raw: strings.Replace(minimal, `"devices":{}`, `"devices":{},"cpu":{"sockets":2,"cores":2,"threads":2}`, 1), cpu: "8", mem: "2Gi"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			vm, errs := Decode([]byte(tc.raw), field.NewPath("spec", "template"))
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			cpu := CPU(vm)
			mem, ok := Memory(vm)
			if !ok {
				t.Fatal("no memory")
			}
			if cpu.Cmp(resource.MustParse(tc.cpu)) != 0 || mem.Cmp(resource.MustParse(tc.mem)) != 0 {
				t.Errorf("shape = %s CPU, %s memory; want %s, %s", cpu.String(), mem.String(), tc.cpu, tc.mem)
			}
		})
	}
}

// BenchmarkDecode decodes and checks a seed template, as the hub does for
// each FleetVirtualMachine's generation.
func BenchmarkDecode(b *testing.B) {
	y, err := os.ReadFile(filepath.Join("..", "..", "test", "testdata", "seed000", "rhel9.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	raw, err := yaml.YAMLToJSON(y)
	if err != nil {
		b.Fatal(err)
	}
	path := field.NewPath("spec", "template")
	b.ReportAllocs()
	for b.Loop() {
		if _, errs := Decode(raw, path); len(errs) > 0 {
			b.Fatal(errs)
		}
	}
}
