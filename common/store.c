// placeholder: implemented by the store module owner
