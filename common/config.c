// placeholder: implemented by the config module owner
