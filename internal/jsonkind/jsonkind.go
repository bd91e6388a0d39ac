// Package jsonkind names, in JSON's words, the value a Go type decodes from, for the
// errors of a JSON document that gives a value of the wrong type (json's own
// *UnmarshalTypeError names Go types: "Go struct field .depth of type int"). The server
// (request bodies) and the built-in plugins (params) both say it this way.
package jsonkind

import "reflect"

// Of is the JSON value t decodes from: "an integer", "a number", "a string", "a
// boolean", "an array", "an object" (pointers are looked through), else "another type".
func Of(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "another type"
}
