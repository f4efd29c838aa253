// placeholder: implemented by the spec module owner
