package vmtemplate

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// checkFields walks decoded JSON alongside the Go type it should fit and
// reports unknown fields and scalars of the wrong kind, with their full path.
//
// Strict JSON decoding cannot do this for KubeVirt: VirtualMachineInstanceSpec
// and a few other types have their own UnmarshalJSON, which decodes the
// subtree leniently and drops unknown fields silently.
func checkFields(path *field.Path, v any, t reflect.Type) field.ErrorList {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if v == nil || opaque(t) {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			return field.ErrorList{wrongType(path, "object")}
		}
		fields := fieldsOf(t)
		var errs field.ErrorList
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			ft, ok := fields[k]
			if !ok {
				errs = append(errs, field.Invalid(path.Child(k), k,
					"unknown field: not part of the KubeVirt VirtualMachine API (kubevirt.io/v1)"))
				continue
			}
			errs = append(errs, checkFields(path.Child(k), obj[k], ft)...)
		}
		return errs
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return nil // []byte travels as a base64 string
		}
		list, ok := v.([]any)
		if !ok {
			return field.ErrorList{wrongType(path, "list")}
		}
		var errs field.ErrorList
		for i, item := range list {
			errs = append(errs, checkFields(path.Index(i), item, t.Elem())...)
		}
		return errs
	case reflect.Map:
		obj, ok := v.(map[string]any)
		if !ok {
			return field.ErrorList{wrongType(path, "object")}
		}
		var errs field.ErrorList
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			errs = append(errs, checkFields(path.Key(k), obj[k], t.Elem())...)
		}
		return errs
	case reflect.String:
		if _, ok := v.(string); !ok {
			return field.ErrorList{wrongType(path, "string")}
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			return field.ErrorList{wrongType(path, "boolean")}
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if _, ok := v.(json.Number); !ok {
			return field.ErrorList{wrongType(path, "integer")}
		}
	case reflect.Float32, reflect.Float64:
		if _, ok := v.(json.Number); !ok {
			return field.ErrorList{wrongType(path, "number")}
		}
	}
	return nil
}

func wrongType(path *field.Path, want string) *field.Error {
	return field.Invalid(path, "", "wrong type: want "+want)
}

var (
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	kubevirtPkg     = "kubevirt.io/"
)

// opaque types decode themselves from a scalar or free-form value
// (resource.Quantity, metav1.Time, intstr.IntOrString, RawExtension...):
// the walk stops there. KubeVirt's own types with an UnmarshalJSON are plain
// structs and are walked.
func opaque(t reflect.Type) bool {
	if o, ok := opaqueTypes.Load(t); ok {
		return o.(bool)
	}
	o := t.Kind() == reflect.Interface ||
		reflect.PointerTo(t).Implements(unmarshalerType) && !strings.HasPrefix(t.PkgPath(), kubevirtPkg)
	opaqueTypes.Store(t, o)
	return o
}

// opaqueTypes holds opaque's answer for each type it was asked about.
var opaqueTypes sync.Map // reflect.Type → bool

// fields holds jsonFields of each struct type checkFields met, as
// encoding/json keeps the fields of each type it met: a type's
// fields do not change, and walking them anew for every object of a
// template was most of its cost (2.2 s of the first minute's 39.5 s of a
// hub restarting at 10,000 FleetVMs, each template checked two or three
// times).
var fields sync.Map // reflect.Type → map[string]reflect.Type

// fieldsOf is jsonFields(t), worked out once per type. The map is shared:
// read it, never write it.
func fieldsOf(t reflect.Type) map[string]reflect.Type {
	if f, ok := fields.Load(t); ok {
		return f.(map[string]reflect.Type)
	}
	f, _ := fields.LoadOrStore(t, jsonFields(t))
	return f.(map[string]reflect.Type)
}

// jsonFields maps the JSON names of a struct's fields to their types,
// flattening embedded and inline structs as encoding/json does.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if (f.Anonymous && name == "") || strings.Contains(","+opts+",", ",inline,") {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					out[k] = v
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}
