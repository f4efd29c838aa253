// placeholder: implemented by the space module owner
